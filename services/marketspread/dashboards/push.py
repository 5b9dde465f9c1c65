"""Upload the dashboards to a Grafana that has no dashboard sidecar (grafana-client).

Grafana's HTTP API is the one contract here: a folder is looked up by uid and created when
missing, then each dashboard is saved with `overwrite` so a push is idempotent.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..errors import MarketSpreadError
from .generate import build_dashboards, check_dashboards

if TYPE_CHECKING:
    from grafana_client import GrafanaApi

__all__ = ["PushError", "connect", "push_dashboards", "FOLDER_UID"]

log = logging.getLogger(__name__)

FOLDER_UID = "market-spread"


class PushError(MarketSpreadError):
    pass


def connect(url: str | None, token: str | None) -> "GrafanaApi":
    """`url` (credentials may be in it, http://user:pass@host:3000) or GRAFANA_URL / GRAFANA_TOKEN."""
    try:
        from grafana_client import GrafanaApi
    except ImportError as error:  # the sender and receiver images do not carry it
        raise PushError("grafana-client is not installed: pip install 'market-spread[k8s]'") from error
    if url:
        return GrafanaApi.from_url(url, credential=token)
    return GrafanaApi.from_env()


def _ensure_folder(api: "GrafanaApi", title: str) -> str:
    from grafana_client.client import GrafanaClientError

    try:
        return api.folder.get_folder(FOLDER_UID)["uid"]
    except GrafanaClientError as error:
        if error.status_code != 404:
            raise
    log.info("creating Grafana folder %r", title)
    return api.folder.create_folder(title, uid=FOLDER_UID)["uid"]


def push_dashboards(api: "GrafanaApi", folder: str = "Market Spread") -> list[str]:
    """Save every dashboard into `folder`; return their uids."""
    from grafana_client.client import GrafanaException

    dashboards = build_dashboards()
    check_dashboards(dashboards)
    try:
        folder_uid = _ensure_folder(api, folder)
        pushed = []
        for name, dashboard in dashboards.items():
            # The API assigns ids: a fixed one would clash with another dashboard's.
            body = {k: v for k, v in dashboard.items() if k != "id"}
            result = api.dashboard.update_dashboard({
                "dashboard": body, "folderUid": folder_uid, "overwrite": True,
                "message": f"marketspread dashboards push ({name})",
            })
            log.info("pushed %s: %s", result.get("uid", body["uid"]), result.get("url", ""))
            pushed.append(body["uid"])
    except GrafanaException as error:
        raise PushError(f"Grafana refused the dashboards: {error}") from error
    except OSError as error:
        raise PushError(f"cannot reach Grafana: {error}") from error
    return pushed
