"""The sandbox that runs submitted generator code: bubblewrap, seccomp and a cgroup around one
process per generator (`isolation`, `process`, `runner`), and the checks of a submitted archive
before anything of it runs (`source`, `npy_header`).

Free of Django and of the apps (import-linter holds it): the runner's side must import nothing
of the platform, and a worker's side is plain processes and files.
"""
