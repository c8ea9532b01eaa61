"""Mensajes en español. Mismas claves y marcadores que en.py."""

MESSAGES: dict[str, str] = {}
