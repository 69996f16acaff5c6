"""Text analysis, below the store, the bank and the context compiler: it reads text and
messages and knows nothing of where they are kept.

- `lexical`: the terms of a text (stems, stop words) and BM25's idf;
- `entities`: names, identifiers and paths a text mentions, as search terms;
- `when`, `calendar_names`: time expressions and the days they mean;
- `redact`: secrets found and masked before anything is written;
- `units`, `said`, `printed`: the memory units of a conversation (what was said, what the
  user said through tools, what tools printed);
- `shorten`: a memory cut to its best part around a query.
"""
