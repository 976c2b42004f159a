"""The objective stage: embeddings of every clip, FAD per system and category against the
reference sets, the finalists, and the medoids that the listening test plays.

`services` runs the stage's jobs, `config` its settings (which model for what), `distances` the
FAD and KAD results and finalists, `medoids` the k-means choice, `reference_stats` published
statistics; `embeddings/` holds the models and their cache, `fad` and `kad` the distances
themselves; `tasks` are its Celery tasks, `api` its REST API, `views` and `urls` its organizer pages. Nothing here imports
torch or scikit-learn at import time: the web process loads the pages and API without them.
"""
