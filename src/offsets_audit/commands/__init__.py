"""The `offsets-audit` sub-commands, one module each (`add_arguments(parser)`, `run(args) -> int`), dispatched by
`offsets_audit.cli`: they sit on top of every stage and may import any of them."""
