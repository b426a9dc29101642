/**
 * Charts for the console's pages (Chart.js, bundled). A chart is a canvas with either
 *   data-chart-url="/…json endpoint…"       fetched with the session, or
 *   data-chart-source="element-id"          the JSON of a <script type="application/json"> (json_script),
 * holding one chart description:
 *   {"type": "bar" | "line",
 *    "labels": ["2026-11-01", …],
 *    "datasets": [{"label": "pii-guard", "data": [3, 0, …]}, …],
 *    "stacked": true | false,
 *    "yFormat": "count" | "usd" | "percent",      (percent data are 0-100)
 *    "title": "optional"}
 * Optional data attributes: data-chart-empty="text shown when there is no data point".
 * Colours come from a fixed palette in dataset order (a dataset may set its own "color").
 * Each rendered canvas gets data-chart-ready="true" and data-chart-points="N" (for tests).
 */
import {
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  Filler,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
} from "chart.js";

Chart.register(BarController, BarElement, CategoryScale, Filler, Legend, LinearScale, LineController, LineElement, PointElement, Tooltip);

const PALETTE = ["#4f46e5", "#0ea5e9", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#ec4899", "#14b8a6", "#64748b", "#84cc16"];
const SEVERITY_COLOURS = { info: "#0ea5e9", warn: "#f59e0b", error: "#ef4444", critical: "#7f1d1d" };

Chart.defaults.font.family = 'ui-sans-serif, system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", sans-serif';
Chart.defaults.font.size = 12;
// Axis text and grid lines in the page's own colours (the light or the dark theme).
const tokens = getComputedStyle(document.documentElement);
Chart.defaults.color = tokens.getPropertyValue("--muted").trim() || "#4b5563";
Chart.defaults.borderColor = tokens.getPropertyValue("--border").trim() || "#e5e7eb";

const FORMATTERS = {
  usd: (value) => `$${Number(value).toLocaleString(undefined, { minimumFractionDigits: value && Math.abs(value) < 1 ? 4 : 2, maximumFractionDigits: 4 })}`,
  percent: (value) => `${Number(value).toLocaleString(undefined, { maximumFractionDigits: 1 })}%`,
  count: (value) => Number(value).toLocaleString(),
};

function colourFor(dataset, index) {
  return dataset.color || SEVERITY_COLOURS[String(dataset.label).toLowerCase()] || PALETTE[index % PALETTE.length];
}

function styledDataset(dataset, index, chartType) {
  const colour = colourFor(dataset, index);
  // A line drawn over stacked bars (a budget) is its own stack: it is not added onto them.
  const type = dataset.type === "line" ? "line" : chartType;
  const overlay = dataset.type === "line" && chartType !== "line" ? { type: "line", stack: "overlay", order: -1 } : {};
  const common = { label: String(dataset.label ?? `Series ${index + 1}`), data: (dataset.data || []).map((value) => (value === null ? null : Number(value))) };
  if (type === "line") {
    return { ...common, ...overlay, borderColor: colour, backgroundColor: `${colour}22`, borderWidth: 2, pointRadius: 2, pointHoverRadius: 4, tension: 0.25, fill: Boolean(dataset.fill) };
  }
  return { ...common, backgroundColor: colour, borderRadius: 2, maxBarThickness: 28 };
}

/**
 * Where a click on a bar goes: the canvas's data-chart-link (the list with the page's filter)
 * narrowed to that day, and to that series when data-chart-series names the filter ("severity",
 * "guardrail"); "other" and "none" are not a value one can filter on.
 */
export function linkFor(canvas, day, series) {
  const base = canvas.dataset.chartLink;
  if (!base) return "";
  const url = new URL(base, window.location.href);
  url.searchParams.set("since", day);
  url.searchParams.set("until", day);
  const param = canvas.dataset.chartSeries;
  if (param && series && series !== "other" && series !== "none") url.searchParams.set(param, series);
  url.searchParams.delete("after");
  url.searchParams.delete("before");
  return url.pathname + url.search;
}

function clickHandler(canvas) {
  return (event, elements, chart) => {
    const hit = chart.getElementsAtEventForMode(event, "nearest", { intersect: true }, false)[0];
    if (!hit) return;
    const target = linkFor(canvas, chart.data.labels[hit.index], chart.data.datasets[hit.datasetIndex].label);
    if (target) window.location.assign(target);
  };
}

function chartConfig(spec, canvas) {
  const type = spec.type === "line" ? "line" : "bar";
  const format = FORMATTERS[spec.yFormat] || FORMATTERS.count;
  const stacked = Boolean(spec.stacked);
  return {
    type,
    data: { labels: (spec.labels || []).map(String), datasets: (spec.datasets || []).map((dataset, index) => styledDataset(dataset, index, type)) },
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: { duration: 250 },
      interaction: { mode: "index", intersect: false },
      onClick: canvas && canvas.dataset.chartLink ? clickHandler(canvas) : undefined,
      onHover: canvas && canvas.dataset.chartLink
        ? (event, elements, chart) => { chart.canvas.style.cursor = chart.getElementsAtEventForMode(event, "nearest", { intersect: true }, false).length ? "pointer" : "default"; }
        : undefined,
      plugins: {
        legend: { position: "bottom", labels: { boxWidth: 10, boxHeight: 10, usePointStyle: true } },
        tooltip: { callbacks: { label: (item) => `${item.dataset.label}: ${format(item.parsed.y ?? 0)}` } },
        title: spec.title ? { display: true, text: String(spec.title) } : { display: false },
      },
      scales: {
        x: { stacked, grid: { display: false }, ticks: { maxRotation: 0, autoSkip: true, autoSkipPadding: 12 } },
        y: {
          stacked,
          beginAtZero: true,
          max: spec.yFormat === "percent" ? 100 : undefined,
          ticks: { callback: (value) => format(value), precision: spec.yFormat === "count" ? 0 : undefined },
        },
      },
    },
  };
}

const pointCount = (spec) => (spec.datasets || []).reduce((sum, dataset) => sum + (dataset.data || []).filter((value) => value !== null).length, 0);

function showMessage(canvas, text) {
  const note = document.createElement("p");
  note.className = "chart-empty";
  note.textContent = text;
  canvas.replaceWith(note);
}

function render(canvas, spec) {
  const points = pointCount(spec);
  if (!points) {
    showMessage(canvas, canvas.dataset.chartEmpty || "No data for this period yet.");
    return;
  }
  const existing = Chart.getChart(canvas);
  if (existing) existing.destroy();
  new Chart(canvas, chartConfig(spec, canvas));
  canvas.dataset.chartReady = "true";
  canvas.dataset.chartPoints = String(points);
}

async function loadSpec(canvas) {
  if (canvas.dataset.chartSource) {
    const source = document.getElementById(canvas.dataset.chartSource);
    if (!source) throw new Error(`no element #${canvas.dataset.chartSource}`);
    return JSON.parse(source.textContent || "{}");
  }
  const response = await fetch(canvas.dataset.chartUrl, { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (!response.ok) throw new Error(`the console answered ${response.status}`);
  return response.json();
}

async function mount(canvas) {
  try {
    render(canvas, await loadSpec(canvas));
  } catch (error) {
    showMessage(canvas, `The chart could not be loaded: ${error.message}.`);
  }
}

function mountAll() {
  document.querySelectorAll("canvas[data-chart-url], canvas[data-chart-source]").forEach(mount);
}

window.KindgiCharts = { render, chartConfig, linkFor, chartOf: (canvas) => Chart.getChart(canvas) };
if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", mountAll);
else mountAll();
