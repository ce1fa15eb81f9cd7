"""The analysis core: each table declared once (key, computation, columns, section, figure, card field) and
computed once per study; the report, paper tables and card read the declarations."""
