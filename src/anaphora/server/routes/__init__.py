"""One router per resource: chat completions, conversations, user data, operations."""
