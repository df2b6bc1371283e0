"""Views: Rich tables and PNG charts. No backend calls, no Typer."""
