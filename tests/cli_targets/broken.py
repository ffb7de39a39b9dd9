"""A model module that cannot be imported."""

raise RuntimeError("this module is broken on purpose")
