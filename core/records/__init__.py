"""What is stored: the tables, the database and its sessions, tokens, commits, GPUs and every kernel a job ran."""
