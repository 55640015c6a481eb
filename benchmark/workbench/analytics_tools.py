"""Analytics tools (WorkBench ``analytics.*``): queries on a website's visit log, and plots.

The visit log (``date_of_visit``, ``visitor_id``, ``page_views``,
``session_duration_seconds``, ``traffic_source``, ``user_engaged``; 2023-09-01 to
2023-11-29) is read-only; the domain's state is the list of plots made.  A plot
is only its file path, ``plots/<time_min>_<time_max>_<value_to_plot>_<plot_type>.png``,
so two plots are the same iff their four arguments are.  The counting queries
return ``{date: value}`` for every date with a visit in the range; their date
bounds compare as text against ``YYYY-MM-DD`` (both inclusive), as in WorkBench.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from benchmark.workbench.state import PLOTS, WorkbenchState
from benchmark.workbench.toolspec import ToolError, tool

PLOT_VALUES = ("total_visits", "session_duration_seconds", "user_engaged", "visits_direct", "visits_referral",
               "visits_search_engine", "visits_social_media")
PLOT_TYPES = ("bar", "line", "scatter", "histogram")
TRAFFIC_SOURCES = ("direct", "referral", "search engine", "social media")
DATES = 'Format "YYYY-MM-DD".'


def _visits(state: WorkbenchState, time_min: str | None, time_max: str | None) -> list[dict[str, Any]]:
    return [r for r in state.analytics
            if (not time_min or r["date_of_visit"] >= time_min) and (not time_max or r["date_of_visit"] <= time_max)]


def _per_date(rows: list[dict[str, Any]], value: Any) -> dict[str, Any]:
    """Sum of ``value(row)`` per date, dates sorted."""
    sums: dict[str, Any] = defaultdict(int)
    for r in rows:
        sums[r["date_of_visit"]] += value(r)
    return dict(sorted(sums.items()))


def get_visitor_information_by_id(state: WorkbenchState, visitor_id: str | None = None) -> list[dict[str, Any]]:
    if not visitor_id:
        raise ToolError("Visitor ID not provided.")
    rows = [dict(r) for r in state.analytics if r["visitor_id"] == visitor_id]
    if not rows:
        raise ToolError("Visitor not found.")
    return rows


def create_plot(state: WorkbenchState, time_min: str | None = None, time_max: str | None = None,
                value_to_plot: str | None = None, plot_type: str | None = None) -> str:
    if not time_min:
        raise ToolError("Start date not provided.")
    if not time_max:
        raise ToolError("End date not provided.")
    if value_to_plot not in PLOT_VALUES:
        raise ToolError("Value to plot must be one of " + ", ".join(f"'{v}'" for v in PLOT_VALUES))
    if plot_type not in PLOT_TYPES:
        raise ToolError("Plot type must be one of 'bar', 'line', 'scatter', or 'histogram'")
    path = f"plots/{time_min}_{time_max}_{value_to_plot}_{plot_type}.png"
    state.table(PLOTS).rows.append({"file_path": path})
    return path


def total_visits_count(state: WorkbenchState, time_min: str | None = None,
                       time_max: str | None = None) -> dict[str, int]:
    return _per_date(_visits(state, time_min, time_max), lambda r: 1)


def engaged_users_count(state: WorkbenchState, time_min: str | None = None,
                        time_max: str | None = None) -> dict[str, int]:
    return _per_date(_visits(state, time_min, time_max), lambda r: int(r["user_engaged"]))


def traffic_source_count(state: WorkbenchState, time_min: str | None = None, time_max: str | None = None,
                         traffic_source: str | None = None) -> dict[str, int]:
    rows = _visits(state, time_min, time_max)
    if not traffic_source:
        return _per_date(rows, lambda r: 1)
    return _per_date(rows, lambda r: int(r["traffic_source"] == traffic_source))


def get_average_session_duration(state: WorkbenchState, time_min: str | None = None,
                                 time_max: str | None = None) -> dict[str, float]:
    rows = _visits(state, time_min, time_max)
    totals = _per_date(rows, lambda r: float(r["session_duration_seconds"]))
    counts = _per_date(rows, lambda r: 1)
    return {d: totals[d] / counts[d] for d in totals}


_RANGE = {"time_min": f"First date of the range. {DATES}", "time_max": f"Last date of the range. {DATES}"}

TOOLS = [
    tool("analytics.get_visitor_information_by_id", get_visitor_information_by_id,
         "Return every visit of the website visitor with the given ID.", side_effects=False,
         visitor_id="ID of the visitor."),
    tool("analytics.create_plot", create_plot,
         "Plot one analytics value over a date range; returns the plot's file path.", side_effects=True,
         **_RANGE, value_to_plot="Value to plot, one of " + ", ".join(f'"{v}"' for v in PLOT_VALUES) + ".",
         plot_type='Plot type, one of "bar", "line", "scatter", "histogram".'),
    tool("analytics.total_visits_count", total_visits_count,
         "Number of visits per date in a date range, as {date: count}.", side_effects=False, **_RANGE),
    tool("analytics.engaged_users_count", engaged_users_count,
         "Number of engaged users per date in a date range, as {date: count}.", side_effects=False, **_RANGE),
    tool("analytics.traffic_source_count", traffic_source_count,
         "Number of visits from one traffic source per date in a date range, as {date: count}.",
         side_effects=False, **_RANGE,
         traffic_source='Traffic source, one of "direct", "referral", "search engine", "social media".'),
    tool("analytics.get_average_session_duration", get_average_session_duration,
         "Average session duration (seconds) per date in a date range, as {date: seconds}.", side_effects=False,
         **_RANGE),
]
