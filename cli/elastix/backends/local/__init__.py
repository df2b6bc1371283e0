"""The local backend: the same rendered JobSet run as local processes under a supervisor."""
