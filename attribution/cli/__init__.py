"""Attribution's commands, and the ``mas-econ`` entry point that collects every stage's (:mod:`.main`)."""
