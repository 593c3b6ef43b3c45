"""The soak: many clients against one server for minutes, checked for lost events, errors and growth."""
