"""The shared domain: settings, models, database, the kernel description, regression and
baselines, ancestry, the kernel store. `api/`, `worker/`, `dashboard/` and `cli/` stand on it;
it imports none of them."""
