"""Running a job's host code confined: the jail (Landlock, seccomp, no new privileges), the process it runs in, and the call across to it."""
