"""The soak test (scripts/soak): mixed, cancelling load against a pytriton server it starts itself."""
