"""`servecap quality`: one configuration's outputs against a reference's, in-process or over two endpoints."""
