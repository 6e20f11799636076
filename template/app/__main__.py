from app.cli import cli

cli()
