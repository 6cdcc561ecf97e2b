"""attention-viz: the Streamlit entry point (pages come with the UI issues)."""

import streamlit as st

st.set_page_config(page_title="attention-viz", layout="wide")
st.title("attention-viz")
st.text_input("Sentence", value="The animal didn't cross the street because it was too tired.", key="text")
