"""The dashboard's web application: read-only pages and JSON over one open store.

Guarantees:
- Read-only: every route is a GET (Starlette answers 405 to anything else) and calls only
  the store's getters; the store itself is opened read-only by ``server.serve``.
- Nothing from the database is markup: pages, page fragments and SVG come from Jinja
  templates with autoescaping on, JSON is serialised by the JSON encoder and the page
  scripts write it with ``textContent``. The Content-Security-Policy allows only this server's own scripts
  and styles, so even markup that slipped through could not run.
- An unknown search or candidate is a 404 page, a malformed query a 400, a database that
  fails underneath a 500 page saying why; never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from schedsearch.core import Rewrite, Store
from schedsearch.dashboard import views
from schedsearch.errors import NotFoundError, SchedsearchError

#: Sent with every page: scripts, styles and images from this server only, no framing.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",  # a running search's pages change from one poll to the next
}


def templates_env() -> Environment:
    """The Jinja environment of the dashboard's templates, escaping everything by default."""
    return Environment(
        loader=PackageLoader("schedsearch.dashboard", "templates"),
        autoescape=select_autoescape(enabled_extensions=("html", "svg"), default_for_string=True, default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _describe_step() -> Callable[[Rewrite], str]:
    # Steps are printed as the CLI prints them, without the names they give new loops; the
    # rules that know those names load Exo, paid once here rather than by the first page.
    from schedsearch.transforms import describe_step

    return describe_step


def create_app(
    store: Store,
    *,
    label: str = "",
    describe: Callable[[Rewrite], str] | None = None,
    allowed_hosts: Sequence[str] = ("*",),
) -> Starlette:
    """The dashboard over ``store`` (which the caller opened and closes). ``label`` names
    the database in page headers; ``allowed_hosts`` are the Host headers answered (the
    server passes the loopback names when it listens on loopback, so that a web page the
    browser visits cannot reach the dashboard through a DNS name of its own)."""
    step_text = describe or _describe_step()
    templates = Jinja2Templates(env=templates_env())

    def page(request: Request, name: str, status: int = 200, **context: Any) -> Response:
        return templates.TemplateResponse(
            request, name, {"db": label, **context}, status_code=status, headers=SECURITY_HEADERS
        )

    def int_param(request: Request, name: str) -> int | None:
        value = request.query_params.get(name, "")
        if not value:
            return None
        try:
            return int(value)
        except ValueError:
            raise HTTPException(400, f"{name} must be a search id (a whole number), not {value!r}") from None

    def index(request: Request) -> Response:
        return page(request, "index.html", searches=views.searches(store))

    def api_searches(request: Request) -> Response:
        return JSONResponse([s.to_json() for s in views.searches(store)], headers=SECURITY_HEADERS)

    def api_search(request: Request) -> Response:
        summary = views.search_summary(store, request.path_params["search_id"])
        return JSONResponse(summary.to_json(), headers=SECURITY_HEADERS)

    def search(request: Request) -> Response:
        return page(request, "search.html", page=views.search_page(store, request.path_params["search_id"], step_text))

    def search_live(request: Request) -> Response:
        # The page's live parts alone (a fragment, not a document): what live.js swaps in.
        return page(
            request, "search_live.html", page=views.search_page(store, request.path_params["search_id"], step_text)
        )

    def plot_svg(request: Request) -> Response:
        plot = views.plot_of(store, request.path_params["search_id"])
        body = templates.get_template("plot.svg").render(plot=plot, standalone=True)
        return Response(body, media_type="image/svg+xml", headers=SECURITY_HEADERS)

    def tree(request: Request) -> Response:
        search_id = request.path_params["search_id"]
        root = int_param(request, "root")
        if root is None:
            raise HTTPException(400, "give the subtree's root candidate: ?root=ID")
        return page(
            request,
            "tree.html",
            tree=views.subtree(store, search_id, root, step_text),
            summary=views.search_summary(store, search_id),
        )

    def candidate(request: Request) -> Response:
        return page(
            request, "candidate.html", page=views.candidate_page(store, request.path_params["candidate_id"], step_text)
        )

    def compare(request: Request) -> Response:
        a, b = int_param(request, "a"), int_param(request, "b")
        if a is None or b is None:
            return page(request, "compare_pick.html", searches=views.searches(store), a=a, b=b)
        return page(request, "compare.html", page=views.compare_page(store, a, b, step_text))

    def error_page(request: Request, status: int, message: str) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=status, headers=SECURITY_HEADERS)
        return page(request, "error.html", status=status, code=status, message=message)

    async def not_found(request: Request, exc: Exception) -> Response:
        return error_page(request, 404, str(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return error_page(request, exc.status_code, exc.detail or "")

    async def store_error(request: Request, exc: Exception) -> Response:
        # A row that fails validation, a database gone or damaged underneath: say so.
        return error_page(request, 500, f"the database cannot be read: {exc}")

    routes = [
        Route("/", index),
        Route("/api/searches", api_searches),
        Route("/api/searches/{search_id:int}", api_search),
        Route("/searches/{search_id:int}", search),
        Route("/searches/{search_id:int}/live", search_live),
        Route("/searches/{search_id:int}/plot.svg", plot_svg),
        Route("/searches/{search_id:int}/tree", tree),
        Route("/candidates/{candidate_id:int}", candidate),
        Route("/compare", compare),
        Mount("/static", StaticFiles(packages=[("schedsearch.dashboard", "static")]), name="static"),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))],
        exception_handlers={NotFoundError: not_found, HTTPException: http_error, SchedsearchError: store_error},
    )
