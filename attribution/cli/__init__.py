"""Attribution's commands (declared in :mod:`attribution.commands`) and the sweep hook adding ``run --rollback``."""
