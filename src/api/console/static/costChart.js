import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import { axisDecimals, dailySeries, utcCalendarDate } from "./dailySeries.js";
import { chf, count } from "./format.js";
import { html } from "./html.js";

/** Daily CHF cost as bars (uPlot, drawn on a canvas), with the same numbers as a table for screen readers. */
export function CostChart({ usage }) {
  const target = useRef(null);
  const days = dailySeries(usage);
  useEffect(() => {
    const element = target.current;
    const width = () => Math.max(280, element.clientWidth);
    const plot = new uPlot(
      {
        width: width(),
        height: 220,
        legend: { show: false },
        cursor: { show: true, drag: { x: false, y: false } },
        // The bars are UTC days: the axis is labelled in UTC whatever the browser's time zone.
        tzDate: utcCalendarDate,
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.15 : 0.01] } },
        axes: [
          { stroke: "#334155" },
          {
            stroke: "#334155",
            // Wide enough for the longest label (micro-CHF ticks have 6 decimals).
            size: (_u, values) => 24 + 8 * Math.max(4, ...(values ?? []).map((v) => v.length)),
            values: (_u, ticks) => ticks.map((v) => v.toFixed(axisDecimals(ticks))),
          },
        ],
        series: [{}, { label: "Cost (CHF)", fill: "#2563eb", stroke: "#1d4ed8", paths: uPlot.paths.bars({ size: [0.7, 40] }), points: { show: false } }],
      },
      // No bar at all on days without cost.
      [days.map((d) => d.t), days.map((d) => (d.cost > 0 ? d.cost : null))],
      element,
    );
    const observer = new ResizeObserver(() => plot.setSize({ width: width(), height: 220 }));
    observer.observe(element);
    return () => {
      observer.disconnect();
      plot.destroy();
    };
  }, [usage]);
  const total = days.reduce((sum, d) => sum + d.cost, 0);
  return html`
    <section class="card" aria-labelledby="chart-title">
      <h2 id="chart-title">Daily cost, last 30 days</h2>
      <p class="hint">${usage.start_date} to ${usage.end_date}: ${chf(total)} in ${count(usage.total.requests)} ${usage.total.requests === 1 ? "request" : "requests"}.</p>
      <div class="chart" ref=${target} role="img" aria-label=${`Bar chart of daily cost; total ${chf(total)}. The same numbers are in the table below it.`}></div>
      <details>
        <summary>Show the daily numbers as a table</summary>
        <div class="table-wrap">
          <table>
            <thead>
              <tr><th scope="col">Day</th><th scope="col" class="num">Requests</th><th scope="col" class="num">Cost</th></tr>
            </thead>
            <tbody>
              ${days.map((d) => html`<tr><th scope="row">${d.day}</th><td class="num">${d.requests}</td><td class="num">${chf(d.cost)}</td></tr>`)}
            </tbody>
          </table>
        </div>
      </details>
    </section>
  `;
}
