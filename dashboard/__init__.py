"""Dashboard: Jinja2 pages and Plotly figure builders, mounted on the API app."""
