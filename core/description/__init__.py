"""What a kernel is: its description and the rules it is checked by (form, precision, inputs, flags, includes, the source guard), resolved on one GPU, and the built-ins."""
