"""Triton's `--cache-config <cache>,<key>=<value>` settings, parsed where a configuration is built (the CLI,
`TritonConfig`, `tritonserver.Options`): a light module, so that the user's process does not load the core for it.

This server implements Triton's `local` cache (an in-memory LRU of responses bounded in bytes): `local,size=BYTES`.
"""

from __future__ import annotations

CACHE_NAMES = ("local",)


def parse_cache_config(items: list[str] | tuple[str, ...]) -> int | None:
    """The `local` cache's size in bytes from Triton's `<cache>,<key>=<value>` items, or None when no cache is
    configured; a ValueError names the item that is wrong."""
    size: int | None = None
    for item in items:
        name, sep, setting = item.partition(",")
        name = name.strip()
        key, eq, value = setting.partition("=")
        key, value = key.strip(), value.strip().strip('"')
        if not sep or not eq or not name or not key:
            raise ValueError(f"--cache-config expects <cache>,<key>=<value> (e.g. local,size=1048576), got '{item}'")
        if name not in CACHE_NAMES:
            raise ValueError(f"--cache-config: unknown cache '{name}'; this server implements the 'local' cache")
        if key != "size":
            raise ValueError(f"--cache-config: unknown setting '{key}' of the local cache; it takes 'size' (bytes)")
        try:
            size = int(value)
        except ValueError:
            raise ValueError(f"--cache-config: local cache size must be an integer number of bytes, got '{value}'"
                             ) from None
        if size < 0:
            raise ValueError(f"--cache-config: local cache size must be >= 0 bytes, got '{value}'")
    return size


def cache_config_items(config: dict[str, dict[str, object]]) -> list[str]:
    """`tritonserver.Options.cache_config` ({"local": {"size": BYTES}}) as `--cache-config` items."""
    return [f"{name},{key}={value}" for name, settings in config.items() for key, value in settings.items()]


__all__ = ["CACHE_NAMES", "cache_config_items", "parse_cache_config"]
