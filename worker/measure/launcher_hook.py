"""The confined process's half of a launcher case (worker/measure/launcher_case.py is the GPU child's):
the set-up hook that worker/launch/launcher_child.py loads there by name (`device.launcher_hook`), which
runs the product's own runner (worker/measure/runner.py) with the job's launcher in the kernel's place.
Everything it needs is imported with this module, before the process's Landlock layer."""

import dataclasses
import json
import statistics

from core.description.kernel_description import KernelDescription
from core.settings import Settings
from worker.arguments import kernel_args
from worker.measure.cases import Case, CaseOutcome, KernelChoice, TimingPolicy
from worker.measure.problem import Problem
from worker.measure.runner import Runner


# A launcher call that returns before its kernel ends holds the host for a launch (microseconds); one
# that synchronises, for the kernel's whole sample and a little more. The two are told apart only where
# a sample is long enough that a launch cannot fill most of it.
WAIT_JUDGED_FROM_MS = 0.05
WAIT_SHARE = 0.9  # of the kernel's median sample


def host_time(host_call_ms: list[float], median_ms: float | None) -> dict:
    """How long a call of the launcher held the host (the median), and whether it waits for its kernel."""
    if not host_call_ms:
        return {}
    held = statistics.median(host_call_ms)
    found: dict = {"host_call_ms": round(held, 5)}
    if median_ms is not None and median_ms >= WAIT_JUDGED_FROM_MS:
        found["waits"] = held >= WAIT_SHARE * median_ms
    return found


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
            if self.outcome.median_ms is not None:
                self.outcome.env["launcher"] = host_time(getattr(self.device, "host_call_ms", []),
                                                         self.outcome.median_ms)
        except Exception as exc:  # reported after the call: the launcher returned, then this
            self.failure = exc

    def after_call(self) -> dict:
        if self.failure is not None:
            raise self.failure
        return json.loads(json.dumps(self.outcome.as_row(), default=float))
