"""Attribution's commands (``--help``'s lines; each command's module is imported only when it runs), and the
options it adds to the runtime's ``run`` (``--rollback``: :mod:`attribution.cli.sweep`, a sweep hook)."""

from descriptor.commands import declare, declare_hook

declare("attribute", "name the responsible agent and decisive step of failed runs",
        "attribution.cli.attribute:attribute_parser")
declare("score-steps", "score every step of failed runs (input of conformal prediction)",
        "attribution.cli.attribute:score_steps_parser")
declare("conformal", "evaluate a conformal method over random calibration/test splits",
        "attribution.cli.conformal:conformal_parser")
declare("calibrate", "fit a conformal threshold on a score file", "attribution.cli.conformal:calibrate_parser")
declare("predict-set", "conformal step sets for new failed runs", "attribution.cli.conformal:predict_set_parser")
declare("rollback", "fork a failed run before its flagged steps and resume it",
        "attribution.cli.rollback:rollback_parser")
declare("rollback-experiment", "roll back every failed run of a sweep with each strategy",
        "attribution.cli.rollback:rollback_experiment_parser")
declare("label-failures", "find each failed run's decisive step by replay from its checkpoints",
        "attribution.cli.rollback:label_failures_parser")
declare_hook("run", "attribution.cli.sweep")
