"""``stctl`` commands, one module per command group; ``cli.py`` assembles the parser."""
