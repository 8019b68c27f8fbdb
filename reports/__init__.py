"""Run directories -> summary.json, p50/p95/p99 curves, SLA verdicts, report.html and report.md.

Public API: `reports.run_data.load_run(run_dir) -> RunData`,
`reports.report.write_report(run_dir, ReportOptions(...)) -> ReportResult`,
`reports.report.build_summary(run_data, ReportOptions) -> dict` (summary.json's shape).
"""
