"""The confined process's half of a launcher case (worker/measure/launcher_case.py is the GPU child's):
the set-up hook that worker/launch/launcher_child.py loads there by name (`device.launcher_hook`), which
runs the product's own runner (worker/measure/runner.py) with the job's launcher in the kernel's place.
Everything it needs is imported with this module, before the process's Landlock layer."""

import dataclasses
import json

from core.description.kernel_description import KernelDescription
from core.settings import Settings
from worker.arguments import kernel_args
from worker.measure.cases import Case, CaseOutcome, KernelChoice, TimingPolicy
from worker.measure.problem import Problem
from worker.measure.runner import Runner


def decode_case(data: dict) -> Case:
    choice = KernelChoice(KernelDescription.model_validate(data["description"]), data["tunables"], data["origin"])
    return Case(data["index"], data["variant"], data["m"], data["n"], data["k"], data["seed"], choice)


class LauncherCase:
    """The set-up hook of a launcher case (worker/launch/launcher_call.py's protocol): the device is made
    and rehearsed in set_up, and call(launcher) runs the product's runner with the launcher as the
    kernel; after_call gives the CaseOutcome as JSON. A subclass names its device (`make_device`)
    and what its set-up and call may open."""

    def __init__(self, args: dict):
        self.runner_class = Runner  # imported with this module, before any Landlock layer
        self.case = decode_case(args["case"])
        self.policy = TimingPolicy(**args["policy"])
        self.plan = kernel_args.ArgPlan(tuple(tuple(p) for p in args["plan"]["passing"]),
                                        tuple(args["plan"]["spelled"]))
        self.compiler = args["compiler"]
        self.compute_capability = args.get("compute_capability")  # the GPU child's, which judged the target
        self.cfg = Settings()  # the defaults: the child's environment holds none of the worker's settings
        self.outcome: CaseOutcome | None = None
        self.failure: Exception | None = None

    def make_device(self):
        raise NotImplementedError

    def set_up(self) -> None:
        self.device = self.make_device()
        self.runner = self.runner_class(self.device)
        # The rehearsal: every code path of the run once, cuBLAS in the launcher's place (its
        # verdict is thrown away), then cuBLAS alone through the timing loop.
        brief = dataclasses.replace(self.policy, warmup_ms=1.0, time_cap_s=0.05, min_time_s=0.0,
                                    sustained_warmup_s=0.01)
        self.runner.run_case(self.case, brief)
        self.runner.run_case(dataclasses.replace(self.case, kernel=None), brief)
        # The timed runs' own inputs (core/description/inputs.py) are drawn and swapped in only around a verified
        # kernel's timing, which the stand-in may not reach (a form whose beta the kernel ignores):
        # drawn and swapped once here, so nothing they need is first loaded after confinement.
        with Problem(self.device, self.case, self.case.form, self.case.precision).timed_inputs(self.case.inputs):
            self.device.synchronize()

    def call(self, launcher) -> None:
        self.device.launcher = launcher
        try:
            self.outcome = self.runner.run_case(self.case, self.policy)
        except Exception as exc:  # reported after the call: the launcher returned, then this
            self.failure = exc

    def after_call(self) -> dict:
        if self.failure is not None:
            raise self.failure
        return json.loads(json.dumps(self.outcome.as_row(), default=float))
