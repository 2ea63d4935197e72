-- Item references in a Responses input (`{"type": "item_reference", "id": "msg_..."}`, what the Vercel AI
-- SDK sends for the earlier output it was given): an item is found by its id among the account's stored
-- responses, their input and their output. Only the items' ids are indexed.
CREATE INDEX responses_output_item_ids ON responses USING gin (jsonb_path_query_array(output_items, '$[*].id'));
CREATE INDEX responses_input_item_ids ON responses USING gin (jsonb_path_query_array(input_items, '$[*].id'));
