"""The `gemmwatch` command."""
