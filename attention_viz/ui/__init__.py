"""The Streamlit side: widgets, caching and page layout only. All computing is elsewhere."""
