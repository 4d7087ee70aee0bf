"""The Streamlit dashboard, installed as the package ``fuseprof_dashboards`` (``fuseprof dashboard`` runs
``app.py`` from wherever it is installed)."""
