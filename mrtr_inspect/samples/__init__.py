"""A sample MRTR server and a scripted client, both written with the official Python SDK (`mcp`)."""
