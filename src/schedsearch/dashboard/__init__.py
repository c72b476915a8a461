"""A read-only web dashboard over a results database (``schedsearch dashboard``).

It lists the searches, and for each search shows its progress plot, its tree with the path
to the best, its fastest candidates and, per candidate, its schedule, its Exo proc against
its parent's and its C; the list and a running search's page follow the search live. Two
searches can be compared.

- ``routes.create_app(store)``: the Starlette application over an open store;
- ``views``: what each page shows, read from the store as frozen records;
- ``tree`` and ``plot``: the search tree cut to a page, the progress plot's geometry;
- ``server``: listening and running uvicorn.

This is the only package that imports Starlette, uvicorn and Jinja2 (the ``dashboard``
extra). It never writes to the database: the store is opened read-only and every route is
a GET that calls the store's getters.
"""
