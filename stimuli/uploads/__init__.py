"""Uploads: a zip of clips (a development or evaluation set, or a system's output) checked and
stored all or nothing.

`imports` checks every file against the clip spec and stores it content-addressed (zips are read
safely by the base's `archives`, which generators' code archives share), `services` stages an upload and runs it as a job, `tasks`
is its Celery task, `api` its REST endpoint and `views` the upload page's action.
"""
