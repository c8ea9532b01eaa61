"""The tutor of `attncli practice`: a session as a pure state machine (session), its words (text), its record."""
