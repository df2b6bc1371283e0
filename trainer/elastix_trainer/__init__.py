"""The elastic trainer that runs on the Pathways head pod (needs the `trainer` extra)."""
