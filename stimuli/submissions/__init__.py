"""Teams submit, check and fix their own systems: team accounts, the challenge's dates,
submissions with their limits, the worker's feedback, the review window and the teams' API.

Team pages live under /teams/<challenge>/..., the organizer's under
/organize/<challenge>/submissions/..., the API under /api/challenges/<challenge>/submissions/.
"""
