"""Subcommands of ``bias-harness`` (one module each: ``add_parser(subparsers)``, then ``args.func(args)``)."""
