"""Results shared by every process: agreement and outcome-report payloads stored in the database
by (kind, parameters, data version), where every app process and worker finds them
(`app.results.service`)."""
