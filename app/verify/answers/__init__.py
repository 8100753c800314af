"""Verifying what the agent answered: the submitted answer or decline, the final message,
the conversation's confirmations."""
