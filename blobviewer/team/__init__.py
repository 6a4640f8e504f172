"""People working together: uploads, ownership, API tokens, sharing, login lockout."""
