-- An optional signing secret per queue (space-separated whsec_ secrets, the first current):
-- deliveries of that queue are signed with it instead of WORKLY_SIGNING_SECRET. Write-only
-- through the API.
ALTER TABLE queues ADD COLUMN signing_secret text;
