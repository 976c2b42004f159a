"""The objective stage: embeddings of every clip, FAD per system and category against the
reference sets, the finalists, and the medoids that the listening test plays.

`pipeline` runs the stage (jobs, settings, reference statistics), `embeddings/` holds the models
and their cache, `fad` the Fréchet Audio Distance, `medoids` the k-means choice; `tasks` are its
Celery tasks, `api` its REST API, `views` and `urls` its organizer pages. Nothing here imports
torch or scikit-learn at import time: the web process loads the pages and API without them.
"""
