-- W3C trace context: the traceparent (and tracestate) an enqueue or a publish carried, so
-- that every attempt's delivery continues that trace. Nullable without a default: adding
-- them rewrites nothing.
ALTER TABLE tasks ADD COLUMN traceparent text;
ALTER TABLE tasks ADD COLUMN tracestate text;
