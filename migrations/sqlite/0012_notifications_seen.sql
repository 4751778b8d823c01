-- The last in-app notification a user has seen (the navigation's unread
-- count is what came after it).
ALTER TABLE users ADD COLUMN notifications_seen_id INTEGER NOT NULL DEFAULT 0;
