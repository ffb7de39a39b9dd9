"""Small helpers of pytriton's own packages (not an API)."""
