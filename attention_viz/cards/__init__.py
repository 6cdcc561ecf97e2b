"""Model cards and tables measured through the app's own backends, so a shipped model is judged the
way the app runs it: above backends in the layering, beside the figures. ``induction`` writes the
induction model's card; ``head_importance`` the toy-translate head-importance table."""
